"""Zone **common** — code both the judge and the runner load: the records and channels that cross their
boundary, shared tensors, model loading and input drawing, the CUDA runtime calls, the runner-side timers. It
keeps no verdict state; whoever reads something off a channel checks it."""
