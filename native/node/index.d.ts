// Public JS API of the Lucent native addon (crate native/node, package dir native/node).
// Loaded with `require('<repo>/native/node')` (index.js picks the built lucent.<platform>.node).
// Every function that fails throws / rejects an Error whose `code` is one of the stable engine
// codes below (the Rust table lives in native/core/src/error.rs). The gateway maps them to the
// API's error_code in ONE place (server/errors.ts).

export type EngineErrorCode =
  | 'unsupported_format' // input or output format not supported
  | 'image_too_large'    // pixel count / allocation over limits
  | 'decode_failed'      // corrupt / truncated / hostile input
  | 'encode_failed'
  | 'gpu_unavailable'    // LUCENT_BACKEND=gpu but no adapter
  | 'device_lost'        // the GPU device was lost mid-run
  | 'model_missing'      // a model file is absent or fails its hash
  | 'model_invalid'      // a model file cannot be parsed / unsupported layer
  | 'unknown_model'      // catalog name not known
  | 'invalid_argument'
  | 'aborted'            // AbortSignal fired
  | 'internal'

export interface EngineOptions {
  modelDir: string                 // directory laid out like shared/models (sr/, face/, denoise/ ...)
  backend?: 'auto' | 'gpu' | 'cpu' // default: env LUCENT_BACKEND or 'auto'
  adapter?: string                 // substring of the wgpu adapter name to prefer (env LUCENT_ADAPTER)
  threads?: number                 // CPU backend threads (default: all cores)
  tile?: number                    // force a tile side in input px (tests/benchmarks; default: backend's max)
}

export interface EngineInfo {
  backend: 'gpu' | 'cpu'
  adapter: string                  // adapter name, or 'cpu'
  f16: boolean                     // shader-f16 in use
}

export interface CatalogEntry {
  name: string                     // e.g. 'general_4x'
  kind: 'photo' | 'video'
  scale: number                    // 1, 2 or 4
  category: 'enhance' | 'generative'
  networks: string[]               // model files relative to modelDir, e.g. 'sr/realesr-general-x4v3'
  description: string
  available: boolean               // false: listed by the API but not runnable here (-> unknown_model)
  reason?: string                  // why not available
  pipeline: string                 // 'tiled_sr' | 'unavailable'
}

export interface ProbeResult { format: string; width: number; height: number; channels: number; bitDepth: number }

export interface EnhanceOptions {
  model: string                    // catalog name
  format: string                   // output format / extension, with or without the dot ('png', '.jpg')
  exif?: boolean                   // keep EXIF (default false)
  dpi?: number                     // write this DPI (ignored for generative models); default keep input's
  quality?: number                 // jpeg/heif quality 1..100 (default 90)
}

export interface EnhanceResult {
  data: Buffer; width: number; height: number; format: string; ms: number
  decodeMs: number; runMs: number; encodeMs: number  // parts of ms
}

/** Initialise the process-wide engine (idempotent: later calls return the same engine's info). */
export function init(opts: EngineOptions): EngineInfo
export function info(): EngineInfo
export function catalog(): CatalogEntry[]
export function probe(data: Buffer): ProbeResult
/** Decode, run the model's pipeline, encode. onProgress gets 0..100. */
export function enhance(data: Buffer, opts: EnhanceOptions, signal?: AbortSignal,
                        onProgress?: (pct: number) => void): Promise<EnhanceResult>
/** Video path: `count` RGB24 frames of width x height packed in `frames`; returns RGB24 frames at the
 *  network's output size (width*scale x height*scale). Face models (face_soft_2x, portrait_restore_*)
 *  also return `faceState`: pass it as `opts.faceState` with the next batch of the same video so face
 *  boxes stay smoothed across batches (omit it for a video's first batch). */
export function enhanceFrames(frames: Buffer,
                              opts: { model: string; width: number; height: number; count: number; faceState?: Buffer },
                              signal?: AbortSignal): Promise<{ data: Buffer; width: number; height: number; faceState?: Buffer }>
