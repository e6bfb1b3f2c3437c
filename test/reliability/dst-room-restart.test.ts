/**
 * When the store has read a replica restart's loss (dst/registry-loss.ts), which ends the room
 * check's excuse for a grant made while the store still counted adapters the restart forgot
 * (dst/room-check.ts): a poll leaves an adapter under an unload lock as it is, and the holder's
 * end as not done puts it back `loaded`, dated after that poll (docs/reliability.md, "every unload
 * lock is ended by its holder"). Seed 202113: fin, forgotten in replica-0's restart, was under
 * an unload lock when the first poll after it read the registry; that unload, never sent (its
 * node's path to the replica slowed), ended not done at 3,971 ms, and at 3,979 ms the store,
 * counting fin (unloading again, for team,a) and a, granted request 22 a's unload for sql.
 */
import { roomOverMade } from '../../dst/room-check';
import { registryLosses, registryReadAt, type RegistryRead, type UnloadLock } from '../../dst/registry-loss';

const URL = 'http://replica-0:8000';
const loss = { url: URL, at: 1525, names: ['fin'] };
/** The first poll after the restart, begun while fin's unload lock (2,969-3,971 ms) was held. */
const firstRead: RegistryRead = { url: URL, startedAt: 2950, at: 2982 };
const finLock: UnloadLock = { url: URL, adapter: 'fin', at: 2969, endedAt: 3971 };

describe("a restart's loss is read by a poll the forgotten adapter's unload lock did not span", () => {
  it('the first poll after the restart reads it when no unload lock there spans it', () => {
    expect(registryReadAt(loss, [firstRead])).toBe(2982);
    // A lock on an adapter the restart did not forget, or on another replica, changes nothing.
    expect(registryReadAt(loss, [firstRead], [{ ...finLock, adapter: 'a' }])).toBe(2982);
    expect(registryReadAt(loss, [firstRead], [{ ...finLock, url: 'http://replica-1:8000' }])).toBe(2982);
    // Nor one that ended before the poll began, or granted after it applied.
    expect(registryReadAt(loss, [firstRead], [{ ...finLock, at: 2000, endedAt: 2940 }])).toBe(2982);
    expect(registryReadAt(loss, [firstRead], [{ ...finLock, at: 2990, endedAt: 3100 }])).toBe(2982);
    // Nor one its holder ended done: the entry dropped then, the poll after reads the registry.
    expect(registryReadAt(loss, [firstRead], [{ ...finLock, done: true }])).toBe(2982);
  });

  it('a poll while a forgotten adapter was under an unload lock does not read it: the next one begun after the lock ended does', () => {
    expect(registryReadAt(loss, [firstRead], [finLock])).toBe(Infinity);
    // Begun before the lock's end (applied after it): the entry, back `loaded` since the end, is newer.
    const during: RegistryRead = { url: URL, startedAt: 3960, at: 3990 };
    const after: RegistryRead = { url: URL, startedAt: 3980, at: 4010 };
    expect(registryReadAt(loss, [firstRead, during, after], [finLock])).toBe(4010);
    // Held still: no poll reads it.
    expect(registryReadAt(loss, [firstRead, after], [{ ...finLock, endedAt: undefined }])).toBe(Infinity);
  });

  it("seed 202113's grant is excused while the store still counted fin, not once a poll read the loss", () => {
    const teamLock: UnloadLock = { url: URL, adapter: 'fin', at: 3974, endedAt: 4977 };
    const e = { url: URL, name: 'a', at: 3984, ms: 0, loaded: 0 };
    const calls = {
      loads: [
        {
          at: 3186,
          url: URL,
          name: 'a',
          proc: 'n1g0',
          sender: 'n1g0r0',
          alone: false,
          request: 11,
          endedAt: 3388,
        },
      ],
      unloads: [
        {
          at: 3982,
          grantedAt: 3979,
          endedAt: 3984,
          url: URL,
          name: 'a',
          request: 22,
          for: 'sql',
          proc: 'n1g0',
          alone: false,
        },
      ],
    };
    const w = (reads: RegistryRead[]) => ({
      lastFaultAt: 2709,
      faultOpen: false,
      degraded: true,
      resets: [842],
      restores: [],
      registryLost: registryLosses([loss], reads, [finLock, teamLock]),
    });
    expect(roomOverMade(e, 2, calls, w([firstRead]))).toBeUndefined();
    // A poll begun after fin's first lock ended and applied before the second was granted read it.
    const between: RegistryRead = { url: URL, startedAt: 3972, at: 3973 };
    expect(roomOverMade(e, 2, calls, w([firstRead, between]))).toMatch(/left 0 loaded/);
  });
});
