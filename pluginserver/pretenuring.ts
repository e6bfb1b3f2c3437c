/**
 * Imported first by main.ts, before any plugin is loaded: V8's allocation-site pretenuring off.
 *
 * Pretenuring allocates an object literal's later objects straight into the old generation once
 * most of its objects survived a young-generation collection. A request's objects live across
 * a few PDK round trips, so a site caught alive during warm-up was pretenured; its objects then
 * held the request's young ones (parsed body, closures, views) past the next collection, dead or
 * not, and that collection promoted them, to hold the next request's in turn. Measured: about
 * 4.6 KB a routed request promoted, scavenges taking several times the no-op plugin's
 * (test/kong/young-promotion.test.ts, docs/benchmarks.md). Off, each collection copies only what
 * is live. The flag is read at each collection (V8 src/heap/pretenuring-handler-inl.h
 * `UpdateAllocationSite` returns at once without it; Node's deps/v8), so setting it at start-up
 * takes effect; nothing is decided or answered differently.
 */
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--no-allocation-site-pretenuring');
