// Model files: the manifest, verification, downloads (`lucent models fetch`) and .mat -> ncnn conversion.
export { loadManifest, parseManifest, requiredFiles, type ManifestEntry } from './manifest.js'
export { verifyModels, listModels, assertModelsReady } from './verify.js'
export { downloadModels, ModelDownloadError, type DownloadEvent } from './download.js'
export { convertMatConvNet } from './convert.js'
export { runModelsCli } from './cli.js'
