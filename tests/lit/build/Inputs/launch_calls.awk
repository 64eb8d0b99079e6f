# launch_calls.awk precc_kernels.h: one call of every generated launcher,
# for launch_hooks.c: pointer param i gets the fake device address P(i),
# m the run's m, seed 7, stream 0.
/^int precc_k_[0-9a-f]*\(/ {
	name = $0
	sub(/\(.*/, "", name)
	sub(/^int /, "", name)
	args = $0
	sub(/^[^(]*\(/, "", args)
	sub(/\);$/, "", args)
	n = split(args, a, ", ")
	s = ""
	for (i = 1; i <= n; i++) {
		if (a[i] ~ /int64_t m$/) v = "m"
		else if (a[i] ~ /uint64_t seed$/) v = "7"
		else if (a[i] ~ /void \*stream$/) v = "0"
		else v = "P(" (i - 1) ")"
		s = s (i > 1 ? ", " : "") v
	}
	printf "printf(\"call %s\\n\");\nif (%s(%s))\n\tprintf(\"failed\\n\");\n", name, name, s
}
