"""Images: references, safe file reading, decoding (PIL and DICOM)."""
