# A misspelled attribute.
stack "s" {}
provider "sim" {}
group "g" {
  sise = 5
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
