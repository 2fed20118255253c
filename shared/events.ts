/**
 * A typed event emitter: Node's EventEmitter, typed by an interface of listener signatures (one
 * documented member per event), so `on`/`once`/`off` take only its event names with their listener
 * type and `emit` only their arguments. The Hub, AgentLink and AgentRuntime extend it instead of
 * each merging its own on/once/off/emit overloads into the class.
 */
import { EventEmitter } from 'node:events';

/** A listener interface -> the argument tuple of each event (Node's typed EventEmitter map). */
export type EventArgs<E> = { [K in keyof E]: E[K] extends (...args: infer A) => void ? A : never };

export class TypedEmitter<E extends { [K in keyof E]: (...args: never[]) => void }> extends EventEmitter<EventArgs<E>> {}
