model "m */ #error model \\"
linear("a.b", 64, 64)
