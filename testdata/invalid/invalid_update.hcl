# A rolling update has to replace at least one instance at a time.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  update { max_parallel = 0 }
}
