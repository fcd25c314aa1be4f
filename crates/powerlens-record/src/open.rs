//! Opening a recording to read it, and the warning to show when its content check finds
//! it damaged.

use std::path::Path;

use powerlens_store::recording::{ContentCheck, RecordingReader};
use powerlens_store::StoreError;

use crate::error::{Doing, RecordError};

/// Opens a recording to read it, and checks that the tables its figures come from are
/// what the recorder wrote: the warning to show when they are not (SQLite has no checksum
/// of its own, so a damaged number would otherwise be read as another number).
pub fn open_recording(path: &Path) -> Result<(RecordingReader, Option<String>), RecordError> {
    let reader = open_unchecked(path)?;
    let warning = content_warning(path, reader.check_content())?;
    Ok((reader, warning))
}

/// Opens a recording whose content a reader checks later ([`content_warning`]), from the
/// chunks it reads anyway (`report`'s pass).
pub fn open_unchecked(path: &Path) -> Result<RecordingReader, RecordError> {
    RecordingReader::open(path).doing(|| format!("opening the recording {}", path.display()))
}

/// The warning to show for what a content check of `path` found, when there is one.
pub fn content_warning(
    path: &Path,
    check: Result<ContentCheck, StoreError>,
) -> Result<Option<String>, RecordError> {
    let check = check.doing(|| format!("checking the recording {}", path.display()))?;
    Ok(check.warning(path))
}
