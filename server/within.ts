/**
 * `within(ms, p)`: whether a promise settled in time. For the closes that talk to a service which may not answer
 * (a frozen or restarting Redis: a command written to a live socket waits forever), so a shutdown is bounded.
 */

/** Whether `p` settled (resolved or rejected) within `ms`; it is not cancelled and may still settle later. */
export async function within(ms: number, p: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((r) => { timer = setTimeout(() => r(false), ms) })
  try {
    return await Promise.race([p.then(() => true, () => true), late])
  } finally {
    clearTimeout(timer)
  }
}
