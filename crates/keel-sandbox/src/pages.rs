//! Start-up's pages, given back once a process is under way.
//!
//! Starting keel touches code and constant data it never runs again (argument parsing,
//! configuration, the dynamic loader's work), and those pages count in its resident size
//! for as long as it lives. The spawner, keel's own program started again, is the same
//! with less to do after. Once under way, each drops every clean page of its program
//! files from its own page tables: what it uses again comes back from the page cache on
//! first touch (a minor fault), the rest stops counting.
#![expect(unsafe_code, reason = "madvise has no safe wrapper")]

/// A range of this process's address space: start and length in bytes.
type Range = (usize, usize);

/// Drops the resident pages of every mapping of a file that holds only the file's own
/// contents (read-only, nothing written into it), so they fault back in when touched.
/// Safe with other threads running: a page they touch meanwhile faults back in unchanged.
pub fn release_clean_pages() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    for (start, len) in droppable(&smaps) {
        // SAFETY: the range is a mapping of this process that maps a file read-only and
        // holds no page of its own (`Anonymous: 0 kB`): dropping its pages loses nothing,
        // since each comes back from the file unchanged. Nothing in keel writes to a
        // mapping it made read-only, so none gains a page of its own meanwhile.
        unsafe {
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED);
        }
    }
}

/// The mappings in `smaps` that map a file without write access and hold no private
/// (copied-on-write) page: their pages can be dropped and read again from the file.
fn droppable(smaps: &str) -> Vec<Range> {
    let mut out = Vec::new();
    let mut current: Option<Range> = None;
    for line in smaps.lines() {
        if let Some(range) = mapping(line) {
            current = range;
        } else if let Some(kb) = line.strip_prefix("Anonymous:")
            && let Some(range) = current.take()
            && kb.trim() == "0 kB"
        {
            out.push(range);
        }
    }
    out
}

/// A mapping's header line: `Some(Some(range))` for a read-only mapping of a file,
/// `Some(None)` for any other mapping, `None` for a line that is not a header.
fn mapping(line: &str) -> Option<Option<Range>> {
    let mut fields = line.split_ascii_whitespace();
    let (span, perms) = (fields.next()?, fields.next()?);
    let (start, end) = span.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    if perms.len() != 4 {
        return None;
    }
    let _offset = fields.next()?;
    let _device = fields.next()?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or("");
    let file = inode != "0" && path.starts_with('/');
    let read_only = !perms.contains('w') && perms.ends_with('p');
    Some((file && read_only && end > start).then_some((start, end - start)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
555982561000-555982563000 r--p 00000000 fe:00 247030                     /usr/bin/keel
Rss:                   8 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
555982563000-555982568000 r-xp 00002000 fe:00 247030                     /usr/bin/keel
Rss:                  20 kB
Anonymous:             0 kB
555982568000-55598256a000 r--p 00007000 fe:00 247030                     /usr/bin/keel
Rss:                   8 kB
Anonymous:             8 kB
55598256a000-55598256b000 rw-p 00009000 fe:00 247030                     /usr/bin/keel
Anonymous:             0 kB
7f0000000000-7f0000021000 rw-p 00000000 00:00 0                          [heap]
Anonymous:             4 kB
7f0000100000-7f0000101000 r--p 00000000 00:00 0
Anonymous:             0 kB
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_file_mappings_are_dropped() {
        assert_eq!(
            droppable(SMAPS),
            vec![(0x5559_8256_1000, 0x2000), (0x5559_8256_3000, 0x5000)]
        );
    }

    #[test]
    fn text_that_is_not_smaps_drops_nothing() {
        assert!(droppable("Anonymous: 0 kB\nnot a header\n").is_empty());
        assert!(droppable("").is_empty());
    }
}
