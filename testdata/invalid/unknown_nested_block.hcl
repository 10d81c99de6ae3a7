# The stack block takes no blocks yet (a backend block will come later).
stack "s" {
  backend "etcd" {}
}
