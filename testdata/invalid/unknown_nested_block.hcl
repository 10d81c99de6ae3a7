# A misspelled block inside the stack block (the only one it takes is backend).
stack "s" {
  backnd "etcd" {}
}
