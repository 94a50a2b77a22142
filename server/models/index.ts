// Model files: catalogue, verification, fetching and .mat -> ncnn conversion.
export {
  loadManifest,
  parseManifest,
  parseSource,
  requiredFiles,
  readRequiredStems,
  expandDependencies,
  resolveModelDir,
  defaultManifestPath,
  MODELS_META_DIR,
  type ManifestEntry,
  type Source,
} from './manifest.js'
export {
  verifyModels,
  listModels,
  assertModelsReady,
  sha256File,
  describeProblem,
  type VerifyResult,
  type VerifyOptions,
  type FileStatus,
  type ListedModel,
} from './verify.js'
export {
  fetchModels,
  githubUrl,
  ModelFetchError,
  DEFAULT_GITHUB_RAW_BASE,
  type FetchOptions,
  type FetchResult,
  type FetchEvent,
} from './fetch.js'
export { convertMatConvNet, type NetKind, type ConvertedNet } from './convert.js'
export { runModelsCli } from './cli.js'
