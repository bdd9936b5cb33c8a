/**
 * Waits for `work` at most `ms` (a rejection counts as finished) and answers whether it finished in
 * time; `work` goes on either way. For shutdown steps that must not hang a process.
 */
export async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  const finished = await Promise.race([work.then(() => true, () => true), timeout]);
  if (timer) clearTimeout(timer);
  return finished;
}
