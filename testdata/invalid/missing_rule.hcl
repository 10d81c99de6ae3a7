# An ingress without rules.
stack "s" {}
ingress "i" {
  sync_interval = "3s"
}
