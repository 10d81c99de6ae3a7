stack "s" {}

provider "sim" { aÈias = "x" }
