// Enhance every photo of a folder with the engine as a library (@lucent/native), no server:
//   LUCENT_MODEL_DIR=data/models node examples/enhance-folder.mjs IN_DIR OUT_DIR [MODEL] [FORMAT]
// MODEL defaults to general_2x, FORMAT (png, jpg, webp, ...) to png. Prints one line per photo; a photo the
// engine refuses is reported with its error code (err.code, e.g. 'decode_failed') and the others go on.
import fs from 'node:fs/promises'
import path from 'node:path'
import lucent from '@lucent/native'

const [inDir, outDir, model = 'general_2x', format = 'png'] = process.argv.slice(2)
if (!inDir || !outDir) {
  console.error('usage: node examples/enhance-folder.mjs IN_DIR OUT_DIR [MODEL] [FORMAT]')
  process.exit(2)
}

// One engine per process: the model directory and the backend ('auto' | 'gpu' | 'cpu').
const info = lucent.init({ modelDir: process.env.LUCENT_MODEL_DIR ?? 'data/models', backend: process.env.LUCENT_BACKEND ?? 'auto' })
const entry = lucent.catalog().find((m) => m.kind === 'photo' && (m.name === model || m.aliases.includes(model)))
if (!entry) {
  console.error(`no photo model ${model}; photo models: ${lucent.catalog().filter((m) => m.kind === 'photo').map((m) => m.name).join(', ')}`)
  process.exit(2)
}
console.log(`engine ${info.backend} (${info.adapter}); ${entry.name}: x${entry.scale}, ${entry.description}`)

await fs.mkdir(outDir, { recursive: true })
for (const name of (await fs.readdir(inDir)).sort()) {
  if (!/\.(png|jpe?g|webp|bmp|tiff?)$/i.test(name)) continue
  const input = await fs.readFile(path.join(inDir, name))
  try {
    const before = lucent.probe(input) // format and size from the header (throws a coded error when not an image)
    // Stops the photo (rejects with code 'aborted') if it takes more than a minute; progress 0..100.
    const out = await lucent.enhance(input, { model: entry.name, format, exif: true }, AbortSignal.timeout(60_000), () => {})
    const file = path.join(outDir, `${path.parse(name).name}.${format}`)
    await fs.writeFile(file, out.data)
    console.log(`${name}: ${before.width}x${before.height} ${before.format} -> ${out.width}x${out.height} ${out.format} in ${Math.round(out.ms)} ms`)
  } catch (err) {
    console.log(`${name}: failed: ${err.code}: ${err.message}`)
    process.exitCode = 1
  }
}
