// A Y4M video of one QR code, for chromium's fake camera (--use-file-for-fake-video-capture):
// the header, then frames of raw I420 (a Y plane, then quarter-size U and V planes). Black
// modules on white, a 4-module quiet zone, as large as the frame allows.
import { writeFileSync } from 'node:fs';
import qrcode from 'qrcode-generator';

export function writeQRVideo(path, text, { width = 640, height = 480, frames = 2 } = {}) {
  const qr = qrcode(0, 'L');
  qr.addData(text, 'Byte');
  qr.make();
  const n = qr.getModuleCount();
  const total = n + 8;
  const scale = Math.floor((Math.min(width, height) - 16) / total);
  if (scale < 2) throw new Error(`a QR code of ${n} modules does not fit ${width}x${height}`);
  const x0 = Math.floor((width - total * scale) / 2) + 4 * scale;
  const y0 = Math.floor((height - total * scale) / 2) + 4 * scale;
  const y = Buffer.alloc(width * height, 235);
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      if (!qr.isDark(r, c)) continue;
      for (let dy = 0; dy < scale; dy++) y.fill(16, (y0 + r * scale + dy) * width + x0 + c * scale, (y0 + r * scale + dy) * width + x0 + (c + 1) * scale);
    }
  }
  const chroma = Buffer.alloc((width / 2) * (height / 2), 128);
  const frame = Buffer.concat([Buffer.from('FRAME\n'), y, chroma, chroma]);
  const header = Buffer.from(`YUV4MPEG2 W${width} H${height} F10:1 Ip A1:1 C420jpeg\n`);
  writeFileSync(path, Buffer.concat([header, ...Array(frames).fill(frame)]));
  return { modules: n, scale };
}
