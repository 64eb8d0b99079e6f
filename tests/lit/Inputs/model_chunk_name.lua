-- a model file's chunk errors are at its own line too
model "chunk_name"
linear("a", 16, 16)
load("\nlinear('b', 16, 0)", "@/etc/shadow")()
