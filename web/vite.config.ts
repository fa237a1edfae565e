// Builds the app into ../shared/webui/dist (checked in, embedded by shared/webui/embed.go).
// Reproducible: hashed asset names, no timestamps; sw.js gets the precache list and a version
// derived from the output; files over 1 KB get a deterministic .gz sibling (no mtime, no name).
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { rolldown } from 'rolldown';
import { defineConfig, type Plugin } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));
const outDir = join(root, '../shared/webui/dist');
const publicDir = join(root, 'public');
const GZIP_EXT = /\.(js|css|html|svg|json|webmanifest|txt|map)$/;

function walk(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((n) => {
      const p = join(dir, n);
      return statSync(p).isDirectory() ? walk(p) : [p];
    });
}

/**
 * sw/sw.js and what it imports (the seal code of src/e2ee and @noble/*) as one classic script:
 * an IIFE with no chunks (minified: @noble's X25519 and SHA-256 are most of it).
 */
async function bundleServiceWorker(): Promise<string> {
  const b = await rolldown({ input: join(root, 'sw/sw.js'), platform: 'browser', logLevel: 'warn' });
  try {
    const { output } = await b.generate({ format: 'iife', codeSplitting: false, minify: true, comments: { legal: false } });
    return output[0].code;
  } finally {
    await b.close();
  }
}

/** Emits sw.js (unhashed) from sw/sw.js, bundled, with the app shell to precache. */
function serviceWorker(): Plugin {
  return {
    name: 'betcode-sw',
    apply: (_c, env) => env.command === 'build' && !env.isSsrBuild,
    enforce: 'post',
    async generateBundle(_opts, bundle) {
      const files = [
        ...Object.keys(bundle).filter((f) => !f.endsWith('.map')),
        ...walk(publicDir).map((p) => relative(publicDir, p).split(sep).join('/')),
      ]
        .filter((f) => f !== 'sw.js' && !f.endsWith('.gz'))
        .sort();
      const h = createHash('sha256');
      for (const f of files) {
        h.update(f + '\0');
        const b = bundle[f];
        if (b && b.type === 'asset') h.update(typeof b.source === 'string' ? b.source : Buffer.from(b.source));
      }
      const precache = ['/', ...files.map((f) => '/' + f)];
      const code = await bundleServiceWorker();
      h.update('sw.js\0' + code);
      const version = h.digest('hex').slice(0, 16);
      // The bundler may fold the version into the strings that use it: fill in every place.
      const source = code
        .replaceAll('__VERSION__', () => version)
        .replace('__PRECACHE__', () => JSON.stringify(precache));
      if (source.includes('__VERSION__') || source.includes('__PRECACHE__')) throw new Error('sw.js: a placeholder was not filled in');
      this.emitFile({ type: 'asset', fileName: 'sw.js', source });
    },
  };
}

/** Writes a .gz next to every compressible file over 1 KB of the output (deterministic gzip -9). */
function gzipSiblings(): Plugin {
  return {
    name: 'betcode-gzip',
    apply: (_c, env) => env.command === 'build' && !env.isSsrBuild,
    closeBundle() {
      for (const p of walk(outDir)) {
        if (!GZIP_EXT.test(p)) continue;
        const raw = readFileSync(p);
        if (raw.length <= 1024) continue;
        // Node's gzip header has mtime 0, no file name, OS 3: byte-identical across runs.
        const gz = gzipSync(raw, { level: 9 });
        if (gz.length < raw.length) writeFileSync(p + '.gz', gz);
      }
    },
  };
}

export default defineConfig({
  root,
  base: '/',
  publicDir,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  plugins: [serviceWorker(), gzipSiblings()],
  optimizeDeps: { entries: ['index.html'] },
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    assetsInlineLimit: 0,
  },
  server: {
    host: '127.0.0.1',
    port: 5173,
    proxy: {
      // The API: the dev mock (npm run mock) by default, or a real agent/relay via BETCODE_API.
      '/api': { target: process.env.BETCODE_API || 'http://127.0.0.1:7820', ws: true, changeOrigin: false },
    },
  },
});
