"""The offline generator's capture and IR: a traced module, its canonical ops, loss rewrites, the fused groups (one kernel each), their CPU interpreter and shrunk shapes."""
