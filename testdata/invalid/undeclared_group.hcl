# An enrollment whose source group is misspelled.
stack "s" {}
provider "sim" {}
group "cattle" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
enrollment "e" {
  source = group.catle
  target {
    provider = sim
    type     = "disk"
  }
}
