# Cattle or pets, not both.
stack "s" {}
provider "sim" {}
group "g" {
  size        = 2
  logical_ids = ["a", "b"]
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
