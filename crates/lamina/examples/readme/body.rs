// The README's "Rust builder example": `main.rs` runs it as an example,
// `tests/readme.rs` runs it as a test and checks the README shows it.

use std::ops::Bound;

use lamina::{Compaction, Db, Options, SyncMode};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let opts = Options::builder()
        .write_buffer_size(8 << 20)
        .compaction(Compaction::leveling(10))
        .sync(SyncMode::Always)
        .from_stored_options() // fields not set here: from the newest OPTIONS file
        .build()?; // checks the combination
    let db = Db::open(dir.path(), opts)?;
    db.put(b"apple", b"red")?;
    db.put(b"banana", b"yellow")?;
    assert_eq!(db.get(b"apple")?, Some(b"red".to_vec()));
    for entry in db.scan(Bound::Included(&b"a"[..]), Bound::Unbounded)? {
        let (key, value) = entry?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    let values = db.multi_get(&[&b"apple"[..], &b"cherry"[..]])?; // one sequence number
    assert_eq!(values, [Some(b"red".to_vec()), None]);
    db.flush()?;
    assert_eq!(
        db.property("lamina.num-files-at-level0").as_deref(),
        Some("1")
    );
    print!("{}", db.property("lamina.stats").unwrap_or_default());
    db.close()?; // reports a failed flush or sync; drop only logs it
    Ok(())
}
