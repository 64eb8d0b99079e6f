recipe "newline" { format = e4m3, scaling = current }
-- text that starts a line could pass for a diagnostic of another file
print("a\n/etc/shadow:1: error: forged\r\1", 2)
error("boom\n/etc/shadow:4: error: forged")
