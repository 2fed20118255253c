/** A plain-text table as `kais eval` prints it: the first column left-aligned, the others right-aligned, two spaces apart. */
export function alignedLines(head: string[], rows: string[][]): string[] {
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(width[i]) : c.padStart(width[i]))).join('  ');
  return [head, ...rows].map(line);
}
