use crate::exit::Verdict;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<Verdict> {
    anyhow::bail!("not built yet")
}
