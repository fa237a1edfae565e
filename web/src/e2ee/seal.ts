// Sealed envelopes (docs/e2ee-wire.md §3): one Noise_X message from the device to a machine,
// prologue "betcode e2ee v1 seal\0" + machine id, whose payload is a sealedPayload's JSON.
import { unbase64 } from './code';
import type { DeviceKey } from './keys';
import { HandshakeState, X } from './noise';
import { staticKey } from './static';

export const SEAL_PROLOGUE = 'betcode e2ee v1 seal\x00';

/** Seals payload for the machine's key; ephemeral fixes the ephemeral key (tests). */
export async function seal(deviceKey: DeviceKey, machineId: string, machineKey: Uint8Array | string, payload: object, ephemeral?: Uint8Array): Promise<Uint8Array> {
  if (!machineId) throw new Error('seal: no machine id');
  const rs = typeof machineKey === 'string' ? unbase64(machineKey) : machineKey;
  if (rs.length !== 32) throw new Error(`seal: the machine's key is ${rs.length} bytes, not 32`);
  const hs = new HandshakeState({
    pattern: X,
    initiator: true,
    prologue: new TextEncoder().encode(SEAL_PROLOGUE + machineId),
    s: staticKey(deviceKey),
    rs,
    ephemeral,
  });
  const { message } = await hs.writeMessage(new TextEncoder().encode(JSON.stringify(payload)));
  return message;
}
