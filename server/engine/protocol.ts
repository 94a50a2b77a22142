/**
 * The typed protocol between the engine pool (pool.ts, main thread) and its piscina threads (thread.ts).
 * A task goes in as one message; its reply comes back as the task's result. Expected failures are replies
 * `{ ok: false, error_code, message }` (piscina drops custom Error properties across threads). While a task
 * runs, its MessagePort carries `ToThread` messages in (abort) and `ToMain` messages out (progress).
 * Buffers cross without copies: inputs are transferred in, outputs moved back (thread.ts).
 */
import type { MessagePort } from 'node:worker_threads'
import type { EngineErrorCode, EngineInfo, EngineOptions, EnhanceOptions, FramesOptions } from './addon.js'

/** The thread's workerData: the engine's init options. */
export type ThreadData = EngineOptions

export interface InitTask { op: 'init' }
export interface EnhanceTask { op: 'enhance'; input: Uint8Array; port: MessagePort; options: EnhanceOptions }
export interface FramesTask {
  op: 'frames'
  input: Uint8Array
  port: MessagePort
  options: Omit<FramesOptions, 'faceState'> & { faceState?: Uint8Array }
}
/** Frame interpolation of one batch (the addon's interpolateFrames). */
export interface InterpTask {
  op: 'interp'
  input: Uint8Array
  port: MessagePort
  /** `budget`: work units (interpolated frames x their megapixels) this call may spend; absent: unbounded. */
  options: { width: number; height: number; count: number; positions: number[]; budget?: number }
}
/** Background removal of one photo (the addon's segment: u2netp / u2net; server/jobs/segment.ts). */
export interface SegmentTask { op: 'segment'; input: Uint8Array; port: MessagePort; options: { model: string; format?: string; budget?: number } }
/** Drop a loaded own-model network (the addon's forgetNetwork; the engine is one per process). */
export interface ForgetTask { op: 'forget'; path: string }
export type EngineTask = InitTask | EnhanceTask | FramesTask | InterpTask | SegmentTask | ForgetTask

export interface Failure { ok: false; error_code: EngineErrorCode; message: string }

export type InitReply = { ok: true; info: EngineInfo; models: string[] } | Failure
/** `work`: the work units the call spent (the engine's meter: output megapixels through its networks; server/jobs/budget.ts);
 *  always set by the engine threads (optional for the runners' fake pools). */
export type EnhanceReply = { ok: true; data: Uint8Array; width: number; height: number; format: string; ms: number; work?: number } | Failure
export type FramesReply = { ok: true; data: Uint8Array; width: number; height: number; faceState?: Uint8Array; work?: number } | Failure

export type InterpReply = { ok: true; data: Uint8Array; width: number; height: number; count: number; cuts: number[]; work?: number } | Failure

/** `data`: the matted image (RGBA in `format`), `mask`: the grey PNG, both at the upright photo's size. */
export type SegmentReply = { ok: true; data: Uint8Array; mask: Uint8Array; width: number; height: number; format: string; ms: number; work: number } | Failure

export type ForgetReply = { ok: true; forgotten: boolean } | Failure

export interface Replies { init: InitReply; enhance: EnhanceReply; frames: FramesReply; interp: InterpReply; segment: SegmentReply; forget: ForgetReply }
export type ReplyTo<T extends EngineTask> = Replies[T['op']]

/** Main thread -> engine thread, on a running task's port. */
export type ToThread = { t: 'abort' }
/** Engine thread -> main thread, on a running task's port. */
export type ToMain = { t: 'progress'; pct: number }
