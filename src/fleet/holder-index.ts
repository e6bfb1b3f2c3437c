import type { ResidencyTable } from './residency-table';

/**
 * Which replicas' residency tables hold each adapter, store-wide, and in which slot: a decision
 * reads one adapter's presence on every replica, and one lookup by name here replaces one per
 * replica (a map of every resident adapter each, at 64 x 10,000 most of a decision's time).
 */
export class HolderIndex {
  private readonly byName = new Map<string, { tables: ResidencyTable[]; slots: number[] }>();
  private stamp = 0;

  add(name: string, table: ResidencyTable, slot: number): void {
    const h = this.byName.get(name);
    if (h) {
      h.tables.push(table);
      h.slots.push(slot);
    } else this.byName.set(name, { tables: [table], slots: [slot] });
  }

  remove(name: string, table: ResidencyTable): void {
    const h = this.byName.get(name);
    const i = h ? h.tables.indexOf(table) : -1;
    if (!h || i < 0) return;
    const last = h.tables.length - 1;
    h.tables[i] = h.tables[last]!;
    h.slots[i] = h.slots[last]!;
    h.tables.pop();
    h.slots.pop();
    if (last === 0) this.byName.delete(name);
  }

  /**
   * Marks each table holding `name` with its slot there; returns the mark, which
   * `ResidencyTable.markedSlot` reads (valid until the tables change or the next mark).
   */
  mark(name: string): number {
    const stamp = ++this.stamp;
    const h = this.byName.get(name);
    if (h) for (let i = 0; i < h.tables.length; i++) h.tables[i]!.markSlot(stamp, h.slots[i]!);
    return stamp;
  }
}
