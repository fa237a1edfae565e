// The device's own push notifications (shown by sw/sw.js). A prompt answered in the app on this
// device gets no "resolved" push from the machine (the machine withdraws it from the user's other
// devices only: docs/web-api.md, "Push notifications"), so the app closes this device's
// notification of the prompt itself.

/** closePromptNotification closes this device's notifications of prompt requestId of session sid. */
export function closePromptNotification(sid: string, requestId: string): void {
  if (!('serviceWorker' in navigator)) return;
  navigator.serviceWorker.getRegistration().then(
    async (reg) => {
      if (!reg || !('getNotifications' in reg)) return;
      for (const n of await reg.getNotifications()) {
        const d = (n.data || {}) as { sessionId?: string; requestId?: string };
        if (d.sessionId === sid && d.requestId === requestId) n.close();
      }
    },
    () => {},
  );
}
