//! The README's dataset example, run. It is the body of the function below
//! between its `README:` and `END` markers; the engine's
//! `crates/lamina/tests/readme.rs` checks that it is, character for
//! character (indentation aside), a ```rust block of the README.

use std::error::Error;

type Res = Result<(), Box<dyn Error>>;

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
fn dataset() -> Res {
    // README: dataset
    use lamina_dataset::{Dataset, DatasetOptions, FieldIndex, Record};
    use lamina::spatial::{Point, Rect};

    let country = FieldIndex { name: "country".into(), compaction: "binomial:k=4".parse()? };
    let opts = DatasetOptions { fields: vec![country], ..DatasetOptions::default() };  // Hilbert, eager
    let ds = Dataset::open("places", opts)?;
    ds.upsert(&Record { id: 7, point: Point::new(2.35, 48.85), fields: vec![b"FR".to_vec()], payload: b"Paris".to_vec() })?;
    let hits = ds.window(Rect::new(2.0, 48.0, 3.0, 49.0))?;  // ids ascending, components scanned
    assert_eq!(hits.ids, vec![7]);
    assert_eq!(ds.lookup("country", b"FR")?, vec![7]);
    ds.close()?;
    // END
    Ok(())
}

#[test]
fn the_readme_dataset_example_runs() {
    let tmp = tempfile::tempdir().unwrap();
    // The example uses a relative path; this binary has no other test.
    std::env::set_current_dir(tmp.path()).unwrap();
    dataset().unwrap();
}
