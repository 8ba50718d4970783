// Loaded into a server with `--import` when BENCH_HEAP_PROF=<dir> is set (bench/lib.mjs): V8's sampling heap profiler
// over the server's whole life, objects the garbage collector has since freed included, so the profile shows what is
// allocated (what the young generation's collections pay for), not only what stays. Node's own `--heap-prof` keeps
// only the objects still alive when it stops. Written when the process exits, as <dir>/Heap.<pid>.heapprofile,
// for `node bench/profile-top.mjs <dir>`.
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const session = new Session();
session.connect();
// An in-process session answers synchronously, so the profile can be taken in an `exit` listener.
const post = (method, params = {}) => {
  let answer;
  session.post(method, params, (err, result) => {
    if (err) throw err;
    answer = result;
  });
  return answer;
};
post('HeapProfiler.enable');
post('HeapProfiler.startSampling', {
  samplingInterval: 4096,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
process.once('exit', () => {
  const { profile } = post('HeapProfiler.stopSampling');
  writeFileSync(
    join(process.env.BENCH_HEAP_PROF, `Heap.${process.pid}.heapprofile`),
    JSON.stringify(profile),
  );
});
