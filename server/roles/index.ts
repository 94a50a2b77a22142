/**
 * What this process does, from its role (LUCENT_ROLE / `serve --role`) and its place in an embedded cluster
 * (server/cluster.ts):
 *   all (default)   the HTTP API and the jobs in one process (the embedded default)
 *   gateway         the HTTP API only; never loads the engine
 *   worker          runs jobs from the shared queue; serves only /healthz /readyz /metrics
 *   cluster primary (LUCENT_HTTP_PROCESSES >= 2, role all): runs the jobs, never serves the API
 *   cluster child   serves the API; its queue, rate limits and engine state come from the primary unless Redis
 *                   is configured
 * Split roles need the shared queue (LUCENT_REDIS_URL). The worker registry (registry.ts) lists live workers.
 */
import type { Config } from '../config.js'
import type { ClusterLink } from '../cluster.js'

export type Role = Config['role']

/** Cluster mode: `primary` = the engine host of an embedded cluster; `child` = one of its HTTP processes. */
export type ClusterMode = { mode: 'primary' } | { mode: 'child'; link: ClusterLink }

export interface ProcessRole {
  role: Role
  /** Runs jobs: has an engine pool and consumes the queue. */
  runsJobs: boolean
  /** Serves the HTTP API (the job and upload routes). */
  servesApi: boolean
  /** Re-queues CONVERTING jobs at start and sweeps old objects: the process that owns the queue (gateways too
   *  when the queue is shared). */
  recovers: boolean
  /** An embedded cluster's primary. */
  primary: boolean
  /** An embedded cluster's HTTP child: its link to the primary. */
  childLink: ClusterLink | null
  /** A child of role all: engine state and job metrics come from the primary. */
  viaPrimary: boolean
  /** This process hears of every job change (kept converting task-status answers, server/jobs/status.ts). */
  hearsAllJobChanges: boolean
}

/** Checks that the role can run with this configuration (split roles need a shared queue). */
export function checkRole(config: Config): void {
  if (config.role !== 'all' && !config.redisUrl) {
    throw new Error(`configuration: --role ${config.role} needs LUCENT_REDIS_URL (gateways and workers share the BullMQ queue)`)
  }
}

export function processRole(config: Config, cluster?: ClusterMode): ProcessRole {
  checkRole(config)
  const role = config.role
  const childLink = cluster?.mode === 'child' ? cluster.link : null
  return {
    role,
    runsJobs: cluster ? cluster.mode === 'primary' : role !== 'gateway',
    servesApi: cluster ? cluster.mode === 'child' : role !== 'worker',
    recovers: cluster ? cluster.mode === 'primary' || role === 'gateway' : role !== 'worker',
    primary: cluster?.mode === 'primary',
    childLink,
    viaPrimary: !!childLink && role === 'all',
    hearsAllJobChanges: !config.redisUrl && !config.databaseUrl && role === 'all' && cluster?.mode !== 'primary',
  }
}
