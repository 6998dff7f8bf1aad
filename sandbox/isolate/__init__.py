"""Zone **isolate** — what a candidate's process can reach on the machine: how a runner (or a compiler) is
started (launch.py), its process tree, cgroup, Landlock rules, bubblewrap, Docker container, GPU device nodes,
primed bytecode and memory limits. Runs in the judge and the parent, before and around the candidate."""
