/**
 * `lucent keys ...` and `lucent admin token`: the command-line client of the same functions as the HTTP admin API
 * (server/admin/keys.ts), against LUCENT_DATABASE_URL or DATA_DIR/lucent.db; every change writes its audit row with
 * the actor `cli`. Output of the commands that existed before (create, update, list, revoke, topup) is kept line for
 * line: scripts parse it (the key alone on the last line of `keys create`).
 */
import type { Command } from 'commander'
import { loadConfig } from '../config.js'
import { openStore } from '../backends.js'
import { ApiError } from '../errors.js'
import type { Store } from '../store/types.js'
import type { KeyQuotas } from '../store/quotas.js'
import * as keys from './keys.js'
import { newAdminToken } from './token.js'

function die(msg: string): never {
  process.stderr.write(`lucent: ${msg}\n`)
  process.exit(2)
}

function intArg(v: string | undefined, name: string, def?: number): number {
  if (v === undefined) {
    if (def === undefined) die(`--${name} is required`)
    return def
  }
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 0) die(`--${name} must be a non-negative integer`)
  return n
}

const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString())

/** Runs `fn` with the store (closed afterwards) and the admin context of the CLI; an ApiError of the admin
 *  functions is the command's error message (exit status 2). */
async function withAdmin(fn: (ctx: keys.AdminContext) => Promise<void>) {
  const config = loadConfig()
  let store: Store
  try {
    store = await openStore(config)
  } catch (e) {
    die(`cannot open the store: ${(e as Error).message}`)
  }
  try {
    await fn({ store, actor: { actor: 'cli', requestId: null }, fetchAllow: config.fetchAllow })
  } catch (e) {
    if (e instanceof ApiError) {
      await store.close()
      die(e.hint ?? e.message)
    }
    throw e
  } finally {
    await store.close()
  }
}

async function create(o: { coins?: string; trial?: string; expires?: string; rate?: string; webhook?: string; reason?: string }) {
  const coins = intArg(o.coins, 'coins')
  const trial = intArg(o.trial, 'trial', 0)
  let expiresAt: number | null = null
  if (o.expires !== undefined) {
    expiresAt = Date.parse(o.expires)
    if (!Number.isFinite(expiresAt)) die('--expires must be an ISO 8601 date/time')
  }
  let rate: number | null = null
  if (o.rate !== undefined) {
    rate = Number(o.rate)
    if (!Number.isFinite(rate) || rate <= 0) die('--rate must be a positive number (requests per second)')
  }
  await withAdmin(async (ctx) => {
    let c: keys.CreatedKey
    try {
      c = await keys.createKey(ctx, { coins, trial, expiresAt, rate, webhookUrl: o.webhook, reason: o.reason })
    } catch (e) {
      // the webhook URL's message as before
      if (e instanceof ApiError && e.hint?.startsWith('webhook: ')) die(`--${e.hint}`)
      throw e
    }
    process.stdout.write(`created key ${c.row.id}: coins=${coins} trial=${trial} expires=${expiresAt ? new Date(expiresAt).toISOString() : 'never'} rate=${rate ?? 'default'} webhook=${c.webhookUrl ?? 'none'}\n`)
    process.stdout.write('the webhook signing secret, then the key (last line), are shown only this once:\n')
    process.stdout.write(`${c.webhookSecret}\n`)
    process.stdout.write(`${c.key}\n`)
  })
}

const list = () => withAdmin(async ({ store }) => {
  process.stdout.write('id\tcoins\ttrial_left\texpires\trate\trevoked\tcreated\n')
  for (const k of await keys.listKeys(store)) {
    process.stdout.write([k.id, k.coins, `${k.trialLeft}/${k.trialTotal}`, k.expiresAt ? new Date(k.expiresAt).toISOString() : '-',
      k.rate ?? '-', k.revoked ? 'yes' : 'no', new Date(k.createdAt).toISOString()].join('\t') + '\n')
  }
})

async function update(ref: string, o: { webhook?: string; webhookSecret?: boolean; reason?: string }) {
  if (o.webhook === undefined && !o.webhookSecret) die('keys update: give --webhook URL (empty to clear) and/or --webhook-secret')
  await withAdmin(async (ctx) => {
    const k = await keys.resolveKey(ctx.store, ref)
    let r
    try {
      r = await keys.setWebhook(ctx, k.id, { url: o.webhook, newSecret: o.webhookSecret, reason: o.reason })
    } catch (e) {
      if (e instanceof ApiError && e.hint?.startsWith('webhook: ')) die(`--${e.hint}`)
      throw e
    }
    process.stdout.write(`updated ${k.id}: webhook=${r.after.url ?? 'none'} secret=${r.after.secret ? 'set' : 'none'}\n`)
    if (r.secret) process.stdout.write(`the new webhook signing secret (shown only this once; the old one no longer signs):\n${r.secret}\n`)
  })
}

const setDisabled = (ref: string, disabled: boolean, o: { reason?: string }) => withAdmin(async (ctx) => {
  const k = await keys.resolveKey(ctx.store, ref)
  await keys.updateKey(ctx, k.id, { revoked: disabled }, o.reason)
  process.stdout.write(`${disabled ? 'revoked' : 'enabled'} ${k.id}\n`)
})

const topup = (ref: string, n: string, o: { reason?: string }) => withAdmin(async (ctx) => {
  const k = await keys.resolveKey(ctx.store, ref)
  const coins = intArg(n, 'N')
  if (coins === 0) die('N must be at least 1')
  const r = await keys.adjustCoins(ctx, k.id, { delta: coins, kind: 'topup', reason: o.reason ?? 'lucent keys topup' })
  process.stdout.write(`${k.id}: +${coins} coins, balance ${r.ok ? r.key.coins : '?'}\n`)
})

const adjust = (ref: string, d: string, o: { reason?: string }) => withAdmin(async (ctx) => {
  const k = await keys.resolveKey(ctx.store, ref)
  const delta = Number(d)
  if (!Number.isSafeInteger(delta) || delta === 0) die('DELTA must be a non-zero integer (negative takes coins)')
  if (!o.reason) die('--reason is required')
  const r = await keys.adjustCoins(ctx, k.id, { delta, kind: 'adjust', reason: o.reason })
  process.stdout.write(`${k.id}: ${delta > 0 ? '+' : ''}${delta} coins, balance ${r.ok ? r.key.coins : '?'}\n`)
})

const ledger = (ref: string, o: { limit?: string }) => withAdmin(async ({ store }) => {
  const k = await keys.resolveKey(store, ref)
  process.stdout.write('id\tat\tkind\tdelta\tbalance\tjob\treason\n')
  for (const r of await keys.ledger(store, k.id, { limit: intArg(o.limit, 'limit', 50) })) {
    process.stdout.write([r.id, iso(r.at), r.kind, r.delta, r.balanceAfter, r.jobId ?? '-', r.reason ?? '-'].join('\t') + '\n')
  }
})

const usage = (ref: string) => withAdmin(async ({ store }) => {
  const k = await keys.resolveKey(store, ref)
  process.stdout.write(`${JSON.stringify({ key_id: k.id, ...(await keys.usage(store, k.id)) }, null, 2)}\n`)
})

/** A quota option: a count, or `unlimited` (null). */
function quotaArg(v: string | undefined, name: string): number | null | undefined {
  if (v === undefined) return undefined
  if (v === 'unlimited') return null
  return intArg(v, name)
}

const quotas = (ref: string, o: { maxStoredBytes?: string; maxStoredFiles?: string; maxJobsInFlight?: string; reset?: boolean; reason?: string }) => withAdmin(async (ctx) => {
  const k = await keys.resolveKey(ctx.store, ref)
  const patch: Partial<KeyQuotas> = {}
  const b = quotaArg(o.maxStoredBytes, 'max-stored-bytes')
  const f = quotaArg(o.maxStoredFiles, 'max-stored-files')
  const j = quotaArg(o.maxJobsInFlight, 'max-jobs-in-flight')
  if (b !== undefined) patch.maxStoredBytes = b
  if (f !== undefined) patch.maxStoredFiles = f
  if (j !== undefined) patch.maxJobsInFlight = j
  if (o.reset && Object.keys(patch).length) die('--reset takes no quota options')
  if (o.reset || Object.keys(patch).length) await keys.setQuotas(ctx, k.id, o.reset ? null : patch, o.reason)
  const q = await keys.quotas(ctx.store, k.id)
  process.stdout.write(`${JSON.stringify({ key_id: k.id, ...q }, null, 2)}\n`)
})

const audit = (ref: string | undefined, o: { limit?: string }) => withAdmin(async ({ store }) => {
  const keyId = ref === undefined ? undefined : (await keys.resolveKey(store, ref)).id
  process.stdout.write('id\tat\tactor\taction\tkey\tdelta\treason\trequest\n')
  for (const a of await keys.auditLog(store, { keyId, limit: intArg(o.limit, 'limit', 50) })) {
    process.stdout.write([a.id, iso(a.at), a.actor, a.action, a.keyId ?? '-', a.delta ?? '-', a.reason ?? '-', a.requestId ?? '-'].join('\t') + '\n')
  }
})

/** `lucent keys ...` */
export function addKeyCommands(program: Command): void {
  const k = program.command('keys')
    .description('API keys (against LUCENT_DATABASE_URL when set, else DATA_DIR/lucent.db); every change is in the audit trail (actor cli)')
    .addHelpText('after', '\nExamples:\n  lucent keys create --coins 1000 --trial 3\n  lucent keys list\n  lucent keys topup k_3f2a 500\n'
      + '  lucent keys adjust k_3f2a -200 --reason "refund of order 17 reversed"\n  lucent keys revoke k_3f2a\n  lucent keys audit k_3f2a')
  const ref = ['<key>', 'the key itself, its id (k_...), or an unambiguous id/hash prefix'] as const
  const reason = ['--reason <text>', 'why (kept in the audit row)'] as const
  k.command('create')
    .description('create a key; prints it alone on the last line (shown only this once)')
    .option('--coins <N>', 'coins on the key (required)')
    .option('--trial <N>', 'free trial jobs', '0')
    .option('--expires <ISO8601>', 'expiry date/time (default: never)')
    .option('--rate <R>', 'requests per second for this key (default: LUCENT_RATE_PER_SEC)')
    .option('--webhook <URL>', 'default webhook URL of the key\'s jobs (a signing secret is made either way)')
    .option(...reason)
    .addHelpText('after', '\nPrints the webhook signing secret (whsec_...) on the line before the key.\n'
      + '\nExample:\n  KEY=$(lucent keys create --coins 1000 --expires 2027-01-01T00:00:00Z | tail -n 1)')
    .action((o) => create(o))
  k.command('update')
    .description('set or clear the key\'s default webhook URL, or make a new signing secret (printed on the last line)')
    .argument(...ref)
    .option('--webhook <URL>', 'default webhook URL (\'\' clears it)')
    .option('--webhook-secret', 'a new webhook signing secret (the old one no longer signs)')
    .option(...reason)
    .addHelpText('after', '\nExample:\n  lucent keys update k_3f2a --webhook https://example.com/hooks --webhook-secret')
    .action((r: string, o) => update(r, o))
  k.command('list')
    .description('id, balance, trial left, expiry, rate, revoked, created (tab-separated)')
    .action(() => list())
  k.command('revoke')
    .description('disable a key (refused by the API from then on; `keys enable` undoes it)')
    .argument(...ref)
    .option(...reason)
    .action((r: string, o) => setDisabled(r, true, o))
  k.command('enable')
    .description('enable a revoked key again')
    .argument(...ref)
    .option(...reason)
    .action((r: string, o) => setDisabled(r, false, o))
  k.command('topup')
    .description("add coins (ledger row 'topup' with the reason)")
    .argument(...ref)
    .argument('<N>', 'coins to add')
    .option(...reason)
    .action((r: string, n: string, o) => topup(r, n, o))
  k.command('adjust')
    .description("add or take coins (ledger row 'adjust' with the reason); the balance never goes below 0")
    .argument(...ref)
    .argument('<DELTA>', 'coins: positive adds, negative takes')
    .option('--reason <text>', 'why (required; on the ledger row and in the audit row)')
    .action((r: string, d: string, o) => adjust(r, d, o))
  k.command('ledger')
    .description('the key\'s ledger, newest first (tab-separated)')
    .argument(...ref)
    .option('--limit <N>', 'rows', '50')
    .action((r: string, o) => ledger(r, o))
  k.command('usage')
    .description('balance, jobs by status, ledger sums, quotas and their usage (JSON)')
    .argument(...ref)
    .action((r: string) => usage(r))
  k.command('quotas')
    .description('show the key\'s quotas and usage (JSON); with options, set its own quotas first')
    .argument(...ref)
    .option('--max-stored-bytes <N|unlimited>', 'bytes of uploads + transfers kept')
    .option('--max-stored-files <N|unlimited>', 'uploads + transfers kept')
    .option('--max-jobs-in-flight <N|unlimited>', 'jobs submitted and not ended')
    .option('--reset', 'back to the defaults (LUCENT_QUOTA_*)')
    .option(...reason)
    .action((r: string, o) => quotas(r, o))
  k.command('audit')
    .description('the audit trail (of one key, or all), newest first (tab-separated)')
    .argument('[key]', 'the key itself, its id, or an unambiguous prefix (default: every key)')
    .option('--limit <N>', 'rows', '50')
    .action((r: string | undefined, o) => audit(r, o))
}

/** `lucent admin ...` */
export function addAdminCommands(program: Command): void {
  const a = program.command('admin')
    .description('the admin API (docs/api.md "Admin API")')
  a.command('token')
    .description('make an admin token: prints the LUCENT_ADMIN_TOKEN_SHA256 entry to configure, then the token alone on the last line (shown only this once; only its hash is configured)')
    .option('--label <name>', 'who the token is in the audit trail (letters, digits, _ . -)', 'admin')
    .addHelpText('after', '\nSeveral tokens: join their entries with commas.\n\nExample:\n  lucent admin token --label ops')
    .action((o: { label: string }) => {
      let t
      try {
        t = newAdminToken(o.label)
      } catch (e) {
        die(`--label: ${(e as Error).message}`)
      }
      process.stdout.write(`LUCENT_ADMIN_TOKEN_SHA256=${t.entry}\n`)
      process.stdout.write('the admin token (last line) is shown only this once; configure the line above (its sha256), never the token:\n')
      process.stdout.write(`${t.token}\n`)
    })
}
