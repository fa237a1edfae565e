// Renders public/icon-192.png and public/icon-512.png from the design of public/icon.svg
// (rounded blue square, white triangle outline, white dot) with no dependency: a 4×4
// supersampled rasterizer and a PNG encoder. Deterministic; the PNGs are checked in.
// Run: node scripts/icons.mjs
import { writeFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';

const BLUE = [0x25, 0x57, 0xd6];

function distSeg(px, py, ax, ay, bx, by) {
  const dx = bx - ax, dy = by - ay;
  const t = Math.max(0, Math.min(1, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)));
  return Math.hypot(px - ax - t * dx, py - ay - t * dy);
}

// Coverage of the design at a point in 512-unit space: [alpha of square, white?]
function sample(x, y) {
  const r = 96;
  const cx = Math.min(Math.max(x, r), 512 - r), cy = Math.min(Math.max(y, r), 512 - r);
  if (x < 0 || y < 0 || x > 512 || y > 512 || Math.hypot(x - cx, y - cy) > r) return 0;
  const tri = [[256, 104], [408, 392], [104, 392]];
  let d = Infinity;
  for (let i = 0; i < 3; i++) d = Math.min(d, distSeg(x, y, ...tri[i], ...tri[(i + 1) % 3]));
  if (d <= 20 || Math.hypot(x - 256, y - 312) <= 28) return 2;
  return 1;
}

function render(size) {
  const s = 512 / size, N = 4;
  const rows = [];
  for (let py = 0; py < size; py++) {
    const row = Buffer.alloc(1 + size * 4);
    for (let px = 0; px < size; px++) {
      let a = 0, w = 0;
      for (let j = 0; j < N; j++)
        for (let i = 0; i < N; i++) {
          const v = sample((px + (i + 0.5) / N) * s, (py + (j + 0.5) / N) * s);
          if (v) a++;
          if (v === 2) w++;
        }
      const o = 1 + px * 4;
      if (!a) continue;
      const f = w / a;
      for (let k = 0; k < 3; k++) row[o + k] = Math.round(BLUE[k] * (1 - f) + 255 * f);
      row[o + 3] = Math.round((255 * a) / (N * N));
    }
    rows.push(row);
  }
  return png(size, size, Buffer.concat(rows));
}

const CRC = new Uint32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b) {
  let c = 0xffffffff;
  for (const x of b) c = CRC[(c ^ x) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}
function png(w, h, raw) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 6; // RGBA
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

for (const size of [192, 512]) {
  const out = new URL(`../public/icon-${size}.png`, import.meta.url);
  writeFileSync(out, render(size));
  console.log('wrote', out.pathname);
}
