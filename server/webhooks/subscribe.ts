/** A submission's webhook subscription: its `callback_url` (checked: ./target.ts) or the key's default URL, with
 *  `callback_events` (default: the three final events). Resolved before any work, so a bad callback costs nothing.
 *  The route writes it `held` before the job exists and arms it once the submission is answered with the job_id
 *  (server/store/webhooks.ts): a job the client never heard of sends nothing. */
import { ApiError } from '../errors.js'
import { DEFAULT_EVENTS, type WebhookEvent, type WebhookStore, type WebhookSub } from '../store/webhooks.js'
import type { OutboundRules } from '../fetch/index.js'
import { checkCallbackUrl } from './target.js'

export interface CallbackFields { callback_url?: string; callback_events?: string[] }

/** `rules`: the allow-list (LUCENT_FETCH_ALLOW) alone, or with the configuration's outbound settings
 *  (`outboundRules(config)`). */
export async function webhookFor(store: WebhookStore, keyId: string, rules: readonly string[] | OutboundRules, b: CallbackFields): Promise<WebhookSub | null> {
  let url: string
  const kw = await store.keyWebhook(keyId)
  if (b.callback_url !== undefined) {
    const c = await checkCallbackUrl(b.callback_url, rules)
    if (!c.ok) throw new ApiError(c.reason === 'private' ? 110400021 : 110400020, { detail: c.detail })
    url = c.url
  } else if (kw.url) {
    url = kw.url
  } else {
    return null
  }
  if (!kw.secret) throw new ApiError(110400022, { detail: 'the key has no webhook secret: `lucent keys update KEY --webhook-secret` makes one' })
  const events = (b.callback_events?.length ? [...new Set(b.callback_events)] : DEFAULT_EVENTS) as WebhookEvent[]
  return { url, events }
}
