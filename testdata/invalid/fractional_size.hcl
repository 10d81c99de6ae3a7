# A size that is not a whole number.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1.5
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
