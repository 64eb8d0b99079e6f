-- A name that, written raw into a C comment, ends it (*/), starts a
-- directive, opens another comment, and splices the line (??/ as a
-- trigraph, a backslash at the end): precc build escapes it.
recipe "*/ #error recipe ??/ /* \\" {
  description = "a description\nmay have lines",
  format = bf16,
  accumulate = fp32,
  output = bf16,
}
