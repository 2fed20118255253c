import { parseIngress } from '../../../agent/main';

describe('parseIngress', () => {
  it('reads {service, deadlineMs, payloadBytes} and the optional workCoreS', () => {
    expect(parseIngress('{"service":2,"deadlineMs":500,"payloadBytes":1000}', 4)).toEqual({
      service: 2,
      deadlineMs: 500,
      payloadBytes: 1000,
    });
    expect(parseIngress('{"service":0,"deadlineMs":1,"payloadBytes":0,"workCoreS":0.2}', 4)).toMatchObject({ workCoreS: 0.2 });
  });

  it.each([
    ['nope', /not JSON/],
    ['[1]', /JSON object/],
    ['{"service":4,"deadlineMs":1,"payloadBytes":0}', /service must be an integer in 0\.\.3, got 4/],
    ['{"service":1.5,"deadlineMs":1,"payloadBytes":0}', /service must be an integer/],
    ['{"service":0,"deadlineMs":0,"payloadBytes":0}', /deadlineMs must be a number in \(0, 3600000\]/],
    ['{"service":0,"deadlineMs":10,"payloadBytes":-1}', /payloadBytes must be a number in \[0, 10000000000\]/],
    // a payload whose emulated transfer would overflow the timers
    ['{"service":0,"deadlineMs":10,"payloadBytes":1e308}', /payloadBytes must be a number in \[0, 10000000000\], got 1e\+308/],
    ['{"service":0,"deadlineMs":10,"payloadBytes":0,"workCoreS":"x"}', /workCoreS must be a number/],
  ])('refuses %s with one line saying why', (body, msg) => {
    const r = parseIngress(body, 4);
    expect(typeof r).toBe('string');
    expect(r).toMatch(msg);
  });
});
