// Stub: replaced by the implementation in the next commit.
import type { ChannelOptions, PairOptions, Pairing, WebChannel } from './types';

export async function openChannel(_opts: ChannelOptions): Promise<WebChannel> {
  throw new Error('not yet');
}
export async function pair(_opts: PairOptions): Promise<Pairing> {
  throw new Error('not yet');
}
