recipe "hybrid_role" {
  scaling = current,
  input = { format = hybrid },
}
