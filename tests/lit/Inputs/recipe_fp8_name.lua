recipe "x" { format = fp8 }
