"""Small pieces shared by every package of the sample: errors and lazy imports."""
