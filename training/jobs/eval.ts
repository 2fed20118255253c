import type { CommandModule } from 'yargs';
// placeholder so that the skeleton compiles; replaced by the real eval job in this session
export const evalCommand: CommandModule = {
  command: 'eval',
  describe: 'evaluate dispatch/orchestration policies on the simulator',
  handler: () => {
    throw new Error('not implemented yet');
  },
};
