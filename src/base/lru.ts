/**
 * A bounded least-recently-used map. `Map` keeps insertion order, so the first key is the oldest. A hit moves its
 * entry to the young end only once it has aged past a quarter of the capacity: hot entries stay safe from eviction
 * without a delete and a re-insert on every read.
 */
export class Lru<K, V> {
  private readonly map = new Map<K, { value: V; touched: number }>();
  private clock = 0;
  private readonly refreshAfter: number;

  constructor(private readonly capacity: number) {
    this.refreshAfter = Math.max(1, capacity >> 2);
  }

  get(key: K): V | undefined {
    const entry = this.map.get(key);
    if (entry === undefined) return undefined;
    if (++this.clock - entry.touched > this.refreshAfter) {
      entry.touched = this.clock;
      this.map.delete(key);
      this.map.set(key, entry);
    }
    return entry.value;
  }

  set(key: K, value: V): void {
    if (this.capacity <= 0) return;
    this.map.delete(key);
    this.map.set(key, { value, touched: ++this.clock });
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): void {
    this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }

  get size(): number {
    return this.map.size;
  }
}
