# Reference values of ebci::cva(m2, kappa, alpha)$cv for tests/test_subgroups_ebci.py.
#
# Usage: Rscript tests/data/ebci_cva_grid.R EBCI_R_DIR OUT_CSV
#
# EBCI_R_DIR holds the R/ sources of the ebci package (github.com/kolesarm/ebci;
# only R/cv.R is needed, and it needs the lpSolve package). The package's code is
# not part of this repository: keep a copy outside it, e.g. /tmp/ebci_src.
# The grid: m2 = 10^(k/5) for k = -20..40 (five points a decade from 1e-4 to
# 1e8, the integer powers written exactly), plus 0 and a few values of the
# package's own tests; kappa in {1, 3, 200, Inf}; alpha in {0.01, 0.05, 0.1}.
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 2) stop("usage: Rscript ebci_cva_grid.R EBCI_R_DIR OUT_CSV")
for (f in list.files(args[1], pattern = "[.]R$", full.names = TRUE)) source(f)

k <- -20:40
m2 <- ifelse(k %% 5 == 0, as.numeric(sprintf("1e%d", k %/% 5)), 10^(k / 5))
m2 <- sort(unique(c(0, 4, 25, 2.8^2, m2)))
grid <- expand.grid(m2 = m2, kappa = c(1, 3, 200, Inf), alpha = c(0.01, 0.05, 0.1))
n_warn <- 0L
grid$cv <- vapply(seq_len(nrow(grid)), function(j) {
    withCallingHandlers(
        cva(grid$m2[j], kappa = grid$kappa[j], alpha = grid$alpha[j])$cv,
        warning = function(w) {
            n_warn <<- n_warn + 1L
            invokeRestart("muffleWarning")
        }
    )
}, numeric(1))
fmt <- function(x) ifelse(is.infinite(x), "inf", sprintf("%.17g", x))
out <- data.frame(m2 = fmt(grid$m2), kappa = fmt(grid$kappa), alpha = fmt(grid$alpha), cv = fmt(grid$cv))
write.csv(out, args[2], row.names = FALSE, quote = FALSE)
message(nrow(out), " rows, ", n_warn, " warnings; ", R.version.string)
