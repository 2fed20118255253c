import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { UsageError } from '../../../../shared/errors';
import { loadTrace } from '../../../../training/workload/alibaba';
import { tmpDir } from '../../../support/tmp';

// Made-up rows in the two layouts (never real trace rows).
const V2017 = [
  '120,180,7,70,4,Terminated,50,0.01',
  '100,0,7,71,1,Running,100,0.02', // end 0: still running
  '-30,40,8,80,2,Terminated,,', // created before the window, empty plan_cpu / plan_mem
  '110,150,9,90,12,Failed,75,0.005', // rows are not sorted
].join('\n');

const V2018 = ['M1,3,j_1,1,Terminated,500,560,100,0.39', 'R2_1,1,j_1,1,Terminated,570,600,50,', 'M1,10,j_2,12,Running,520,0,,'].join('\n');

function tmpFile(name: string, text: string): string {
  const dir = tmpDir('kais-wl-');
  const f = path.join(dir, name);
  fs.writeFileSync(f, text);
  return f;
}

function rowsWithBadLines(total: number, badAt: number[]): string {
  const lines: string[] = [];
  for (let i = 0; i < total; i++) lines.push(badAt.includes(i) ? `oops,${i},x` : `${i},${i + 10},${i % 7},${i},1,Terminated,50,0.01`);
  return lines.join('\n') + '\n';
}

describe('loadTrace', () => {
  it('parses a v2017 file with its quirks: end 0, empty plan fields, negative times, unsorted rows', () => {
    const t = loadTrace(tmpFile('batch_task.csv', V2017 + '\n'));
    expect(t.layout).toBe('v2017');
    expect(t.skipped).toBe(0);
    expect(t.rows).toHaveLength(4);
    expect(t.rows[0]).toEqual({
      arrivalS: 120,
      endS: 180,
      jobId: '7',
      taskId: '70',
      instances: 4,
      status: 'Terminated',
      planCpu: 50,
      planMem: 0.01,
    });
    expect(t.rows[1].endS).toBeNull();
    expect(t.rows[2]).toMatchObject({ arrivalS: -30, planCpu: null, planMem: null });
    expect(t.rows.map((r) => r.arrivalS)).toEqual([120, 100, -30, 110]);
  });

  it('parses a 9-column v2018 file', () => {
    const t = loadTrace(tmpFile('batch_task.csv', V2018));
    expect(t.layout).toBe('v2018');
    expect(t.rows).toHaveLength(3);
    expect(t.rows[0]).toEqual({
      arrivalS: 500,
      endS: 560,
      jobId: 'j_1',
      taskId: 'M1',
      instances: 3,
      status: 'Terminated',
      planCpu: 100,
      planMem: 0.39,
    });
    expect(t.rows[1].planMem).toBeNull();
    expect(t.rows[2]).toMatchObject({ endS: null, planCpu: null, jobId: 'j_2' });
  });

  it('accepts CRLF line endings and blank lines', () => {
    const t = loadTrace(tmpFile('b.csv', '\r\n' + V2017.split('\n').join('\r\n') + '\r\n\r\n'));
    expect(t.rows).toHaveLength(4);
    expect(t.rows[0].planMem).toBe(0.01);
  });

  it('reads a folder holding batch_task.csv', () => {
    const f = tmpFile('batch_task.csv', V2017);
    const t = loadTrace(path.dirname(f));
    expect(t.file).toBe(f);
    expect(t.rows).toHaveLength(4);
  });

  it('reads a folder holding a single *batch_task.csv', () => {
    const f = tmpFile('v2017_batch_task.csv', V2017);
    expect(loadTrace(path.dirname(f)).file).toBe(f);
  });

  it('rejects a missing file with a UsageError naming the path', () => {
    const p = path.join(os.tmpdir(), 'kais-no-such-dir', 'batch_task.csv');
    expect(() => loadTrace(p)).toThrow(UsageError);
    expect(() => loadTrace(p)).toThrow(p);
  });

  it('rejects a folder without a batch_task file', () => {
    const dir = tmpDir('kais-wl-');
    expect(() => loadTrace(dir)).toThrow(/holds no batch_task.csv/);
  });

  it('rejects an empty file', () => {
    const f = tmpFile('batch_task.csv', '\n\n');
    expect(() => loadTrace(f)).toThrow(UsageError);
    expect(() => loadTrace(f)).toThrow(/is empty/);
  });

  it('rejects a file whose rows have neither 8 nor 9 columns', () => {
    const f = tmpFile('batch_task.csv', 'a,b,c\nd,e,f\n');
    expect(() => loadTrace(f)).toThrow(/line 1 has 3 columns; expected 8 \(v2017 batch_task\) or 9/);
  });

  it('skips a malformed row and reports it in one line', () => {
    const f = tmpFile('batch_task.csv', rowsWithBadLines(200, [16]));
    const lines: string[] = [];
    const t = loadTrace(f, (l) => lines.push(l));
    expect(t.rows).toHaveLength(199);
    expect(t.skipped).toBe(1);
    expect(lines).toEqual([`kais: ${f}: skipped 1 malformed rows of 200 (first at line 17: 3 columns, expected 8)`]);
  });

  it('reads a first row of names as a header, with one line, in a file too short for a malformed row (a header was refused)', () => {
    const header = 'create_timestamp,modify_timestamp,job_id,task_id,instance_num,status,plan_cpu,plan_mem';
    const lines: string[] = [];
    const f = tmpFile('batch_task.csv', `${header}\n${V2017}\n`);
    const t = loadTrace(f, (l) => lines.push(l));
    expect(t.rows).toHaveLength(4);
    expect(t.skipped).toBe(0);
    expect(lines).toEqual([`kais: ${f}: line 1 read as a header (its time field is "create_timestamp")`]);
    // further down, such a row is a malformed one
    expect(() => loadTrace(tmpFile('batch_task.csv', `${V2017}\n${header}\n`), () => undefined)).toThrow(/malformed/);
    // a header alone: one line, the refusal (it was the header note, then the refusal)
    lines.length = 0;
    const only = tmpFile('batch_task.csv', `${header}\n`);
    expect(() => loadTrace(only, (l) => lines.push(l))).toThrow(`--trace: ${only} is empty (no rows after its header)`);
    expect(lines).toEqual([]);
  });

  it('skips a row whose time is not a number', () => {
    const text = rowsWithBadLines(150, []).replace(/^5,15,/m, 'five,15,');
    const lines: string[] = [];
    const t = loadTrace(tmpFile('batch_task.csv', text), (l) => lines.push(l));
    expect(t.rows).toHaveLength(149);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/first at line 6: time "five" is not a number/);
  });

  it('skips a row whose time or numeric field holds only spaces (Number(" ") is 0, not a time)', () => {
    const text = rowsWithBadLines(400, [])
      .replace(/^5,15,/m, ' ,15,')
      .replace(/^7,17,/m, '7,\t,')
      .replace(/^9,19,(.*),50,/m, '9,19,$1,  ,');
    const lines: string[] = [];
    const t = loadTrace(tmpFile('batch_task.csv', text), (l) => lines.push(l));
    expect(t.rows).toHaveLength(397);
    expect(t.rows.some((r) => r.arrivalS === 0 && r.taskId !== '0')).toBe(false);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/skipped 3 malformed rows of 400 \(first at line 6: time " " is not a number\)/);
  });

  it('rejects a file with 1% or more malformed rows, naming the file and the first bad line', () => {
    const f = tmpFile('batch_task.csv', rowsWithBadLines(100, [41]));
    expect(() => loadTrace(f)).toThrow(UsageError);
    expect(() => loadTrace(f)).toThrow(new RegExp(`${f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.*first at line 42`));
  });
});
